"""Per-memory keys and the sealing of a memory's sensitive fields (crypto-shredding).

Each memory's content, value, entities, evidence and metadata are encrypted in the log
with AES-GCM under a key of the memory's own. The keys live in ``erstwhile_keys``,
outside the append-only log, so destroying one key makes that memory's content
unrecoverable while every stored event (and the hash chain over its ciphertext) stays
exactly as written. With ``$ERSTWHILE_MASTER_KEY`` set (32 bytes, URL-safe base64), the
stored keys are themselves wrapped with that master key (envelope encryption). Once a
store holds a wrapped key, a ledger without that master key may not store keys into it
(see :meth:`KeyRing.admit`): every key written after the first wrapped one is wrapped.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from erstwhile.domain.errors import StoreUnavailable
from erstwhile.eventstore.backend import Sql, in_lists, marks

SENSITIVE_FIELDS = ("content", "value", "entities", "evidence", "metadata")
MASTER_KEY_VARIABLE = "ERSTWHILE_MASTER_KEY"
NONCE_BYTES = 12
WRAPPED_KEY = "SELECT memory_id, key_bytes FROM erstwhile_keys WHERE wrapped = 1 LIMIT 1"
"""One wrapped key, if the store holds any: read through the partial index of wrapped
keys (``wrapped = 1`` spelled out, so that a prepared plan may use it), which costs the
same whatever the number of plain keys."""


def new_key() -> bytes:
    """Return a fresh 256-bit key."""
    return AESGCM.generate_key(bit_length=256)


def _encrypt(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(NONCE_BYTES)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def _decrypt(key: bytes, sealed: bytes, aad: bytes) -> bytes:
    return AESGCM(key).decrypt(sealed[:NONCE_BYTES], sealed[NONCE_BYTES:], aad)


def seal(state: dict[str, Any], memory_id: UUID, key: bytes) -> dict[str, Any]:
    """Move the sensitive fields of an event state into one encrypted ``sealed`` field."""
    secret = {name: state.pop(name) for name in SENSITIVE_FIELDS if name in state}
    ciphertext = _encrypt(key, orjson.dumps(secret), memory_id.bytes)
    state["sealed"] = binascii.b2a_base64(ciphertext, newline=False).decode()
    return state


@dataclass
class CheckableKeys:
    """The keys :meth:`KeyRing.checkable` found for memories, to check their seals."""

    keys: dict[str, bytes | None]
    """Each memory's key, unwrapped; ``None`` where it cannot be checked (wrapped, and the
    ring has no master key). A memory whose key is gone is not here."""
    not_unwrapped: set[str]
    """The memories whose wrapped key the ring's master key does not unwrap."""
    unwrapped: int
    """How many wrapped keys it did unwrap."""


def _stored(sql: Sql, memory_ids: Iterable[str]) -> Iterator[tuple[str, bytes, int]]:
    """The stored keys of these memories (ids as text): id, bytes as stored, wrapped."""
    for chunk in in_lists(sorted(set(memory_ids))):
        sql.execute(
            "SELECT memory_id, key_bytes, wrapped FROM erstwhile_keys "
            f"WHERE memory_id IN ({marks(chunk)})",
            chunk,
        )
        for row in sql.fetchall():
            yield str(row["memory_id"]), bytes(row["key_bytes"]), row["wrapped"]


def seal_opens(payload: bytes, memory_id: UUID, key: bytes) -> bool:
    """Whether the seal of a stored event's payload opens with ``key`` (AES-GCM checks
    its tag: a changed key, or another memory's, does not open it)."""
    try:
        sealed = orjson.loads(payload)["sealed"]
        _decrypt(key, binascii.a2b_base64(sealed), memory_id.bytes)
    except (InvalidTag, binascii.Error, ValueError, KeyError, TypeError):
        return False
    return True


def uuid_bytes(memory_id: UUID | str) -> bytes:
    """The 16 bytes of a memory id given as a UUID or as its text (what a seal is bound
    to). Text of 32 hex digits, hyphens aside (the canonical form), is read without
    building a ``UUID``, whose parsing took a sixth of an event's decoding; any other
    text is read as ``UUID`` reads it, and text it refuses raises its ``ValueError``.
    (``bytes.fromhex`` alone would skip whitespace that ``UUID`` refuses.)"""
    if isinstance(memory_id, UUID):
        return memory_id.bytes
    digits = memory_id.replace("-", "")
    if len(digits) == 32:
        try:
            raw = bytes.fromhex(digits)
        except ValueError:
            raw = b""
        if len(raw) == 16:
            return raw
    return UUID(memory_id).bytes


def unseal(state: dict[str, Any], memory_id: UUID | str, key: bytes | None) -> dict[str, Any]:
    """Put the sensitive fields back; with no key (erased), mark the state ``erased``."""
    # Read first, with a key or without: an id that is no UUID is that, whether or not
    # its memory's key is gone (a rewritten id finds no key).
    aad = uuid_bytes(memory_id)
    sealed = state.pop("sealed")
    if key is None or sealed is None:
        state.update(content="", value=None, entities=[], evidence=[], metadata=None, erased=True)
        return state
    try:
        state.update(orjson.loads(_decrypt(key, binascii.a2b_base64(sealed), aad)))
    except (InvalidTag, binascii.Error, ValueError) as error:
        raise StoreUnavailable(
            f"memory {memory_id}: its sealed content does not decrypt"
        ) from error
    return state


class KeyRing:
    """Reads, writes and destroys per-memory keys inside the caller's transaction."""

    def __init__(self, master_key: bytes | None = None) -> None:
        self.master_key = master_key

    @classmethod
    def from_environment(cls) -> KeyRing:
        """Use ``$ERSTWHILE_MASTER_KEY`` as the master key when it is set."""
        text = os.environ.get(MASTER_KEY_VARIABLE)
        if not text:
            return cls()
        try:
            master = base64.urlsafe_b64decode(text.strip())
        except (binascii.Error, ValueError):
            master = b""
        if len(master) != 32:
            raise StoreUnavailable(
                f"${MASTER_KEY_VARIABLE} must be 32 bytes in URL-safe base64 (44 characters)"
            )
        return cls(master)

    def store(self, sql: Sql, keys: Iterable[tuple[UUID, str, bytes]]) -> None:
        """Record new memories' ``(id, namespace, key)`` (wrapped when there is a master key)."""
        sql.executemany(
            "INSERT INTO erstwhile_keys (memory_id, namespace, key_bytes, wrapped) "
            "VALUES (?, ?, ?, ?)",
            [(str(i), namespace, self._wrap(i, k), int(self.master_key is not None))
             for i, namespace, k in keys],
        )  # fmt: skip

    def admit(self, sql: Sql) -> None:
        """Refuse, before anything is written, to store keys this ring would leave
        unprotected or unreadable: where the store already holds wrapped keys and this
        ring has no master key, or one that does not unwrap them.

        Asked on every append that stores keys, inside its write transaction: another
        process may wrap the store's first key at any time, so no answer is cached."""
        self.admit_found(self._a_wrapped_key(sql))

    def admit_found(self, wrapped: tuple[Any, Any] | None) -> None:
        """:meth:`admit`, given what ``WRAPPED_KEY`` found: the id and stored bytes of
        one wrapped key, or None where the store holds none."""
        self._refuse_unreadable(wrapped, "write to this ledger", "nothing was stored")

    def admit_rebuild(self, sql: Sql, why: Callable[[], str]) -> None:
        """Refuse, before a rebuild at opening starts, one that could not read the log:
        where the store holds wrapped keys this ring cannot unwrap. The rebuild decrypts
        every memory's content, while the reads without the master key (or with a wrong
        one) only read the projections: the message gives ``why()`` they must be rebuilt
        (asked only for a refusal), and says that one opening with the store's key is
        needed, once."""
        wrapped = self._a_wrapped_key(sql)
        try:
            self._refuse_unreadable(wrapped, "read this ledger", "")
        except StoreUnavailable:
            doing = (
                f"rebuild this ledger's projections once: {why() or 'their schema changed'}, "
                "and a rebuild reads the content sealed in the log; after it, the store "
                "opens without it again"
            )
            self._refuse_unreadable(wrapped, doing, "nothing was changed", wrong_key_too=True)

    @staticmethod
    def _a_wrapped_key(sql: Sql) -> tuple[Any, Any] | None:
        """The id and stored bytes of one wrapped key, or None where the store holds none."""
        sql.execute(WRAPPED_KEY)
        row = sql.fetchone()
        return None if row is None else (row["memory_id"], row["key_bytes"])

    def _refuse_unreadable(
        self,
        wrapped: tuple[Any, Any] | None,
        doing: str,
        outcome: str,
        wrong_key_too: bool = False,
    ) -> None:
        """Raise ``StoreUnavailable`` if ``wrapped`` (a key as :meth:`_a_wrapped_key`
        found it) does not unwrap with this ring: the message says what it takes to be
        ``doing`` (with a wrong master key too, if ``wrong_key_too``) and, in brackets,
        ``outcome``."""
        if wrapped is None:
            return
        memory_id, stored = wrapped
        try:
            self._unwrap(str(memory_id), bytes(stored), 1, doing, wrong_key_too)
        except StoreUnavailable as error:
            raise StoreUnavailable(f"{error} ({outcome})") from error

    def fetch(self, sql: Sql, memory_ids: Iterable[UUID]) -> dict[UUID, bytes]:
        """Return the keys that still exist for these memories."""
        found = self.fetch_by_text(sql, (str(i) for i in memory_ids))
        return {UUID(memory_id): key for memory_id, key in found.items()}

    def fetch_by_text(self, sql: Sql, memory_ids: Iterable[str]) -> dict[str, bytes]:
        """:meth:`fetch` with the ids as text, as the log's records carry them (a batch
        being decoded then turns no id into text and back)."""
        return self.opened(_stored(sql, memory_ids))

    def opened(self, found: Iterable[tuple[str, Any, int]]) -> dict[str, bytes]:
        """The keys found as stored (memory id as text, key bytes, wrapped), unwrapped."""
        return {
            memory_id: self._unwrap(memory_id, bytes(stored), wrapped)
            for memory_id, stored, wrapped in found
        }

    def present(self, sql: Sql, memory_ids: Iterable[str]) -> set[str]:
        """Which of these memories (ids as text) still have a key; nothing is unwrapped,
        so no master key is needed."""
        found: set[str] = set()
        for chunk in in_lists(sorted(set(memory_ids))):
            sql.execute(
                f"SELECT memory_id FROM erstwhile_keys WHERE memory_id IN ({marks(chunk)})", chunk
            )
            found.update(str(row["memory_id"]) for row in sql.fetchall())
        return found

    def checkable(self, sql: Sql, memory_ids: Iterable[str]) -> CheckableKeys:
        """Return the keys these memories (ids as text) still have, for checking their
        seals (see :class:`CheckableKeys`)."""
        found = CheckableKeys({}, set(), 0)
        for memory_id, stored, wrapped in _stored(sql, memory_ids):
            if wrapped and self.master_key is None:
                found.keys[memory_id] = None
                continue
            try:
                found.keys[memory_id] = self._unwrap(memory_id, stored, wrapped)
            except (StoreUnavailable, ValueError):  # a tag that fails, or bytes cut short
                found.not_unwrapped.add(memory_id)
            else:
                found.unwrapped += wrapped
        return found

    def exists(self, sql: Sql, memory_id: UUID) -> bool:
        """Whether the memory still has a key (its content is readable)."""
        return bool(self.present(sql, [str(memory_id)]))

    def destroy(self, sql: Sql, memory_ids: Iterable[UUID]) -> None:
        """Delete keys: what they sealed can never be read again."""
        doomed = [(str(memory_id),) for memory_id in memory_ids]
        if doomed:
            sql.executemany("DELETE FROM erstwhile_keys WHERE memory_id = ?", doomed)

    def _wrap(self, memory_id: UUID, key: bytes) -> bytes:
        if self.master_key is None:
            return key
        return _encrypt(self.master_key, key, memory_id.bytes)

    def _unwrap(
        self,
        memory_id: str,
        stored: bytes,
        wrapped: int,
        doing: str = "read this ledger",
        wrong_key_too: bool = False,
    ) -> bytes:
        if not wrapped:
            return stored
        if self.master_key is None:
            raise StoreUnavailable(
                f"the memory keys are wrapped: set ${MASTER_KEY_VARIABLE} to {doing}"
            )
        try:
            return _decrypt(self.master_key, stored, uuid_bytes(memory_id))
        except InvalidTag as error:
            needed = f", and the store's own is needed to {doing}" if wrong_key_too else ""
            raise StoreUnavailable(
                f"${MASTER_KEY_VARIABLE} does not unwrap the memory keys{needed}"
            ) from error
