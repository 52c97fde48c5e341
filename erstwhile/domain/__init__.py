"""The pure model of erstwhile: memories, windows, events and the rules between them.

Nothing here reads a clock, a file or a database; every instant is passed in.
"""
