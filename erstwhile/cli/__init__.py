"""The ``erstwhile`` command: thin front ends over :class:`erstwhile.Ledger`."""
