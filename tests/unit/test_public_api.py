"""The public surface is deliberate: this test pins it."""

from __future__ import annotations

import copy
import pickle

import pydantic

import erstwhile

PUBLIC = {
    "ConcurrencyConflict", "Conflict", "ErstwhileError", "History", "Hit",
    "IdempotencyMismatch", "Kind", "Ledger", "LoggedEvent", "Memory", "NotFound",
    "ProjectionStatus", "Proposal", "Rectangle", "ReplayLedger", "State", "StoreUnavailable",
    "SupersessionRefused", "ValidationError", "VerifyReport", "__version__",
}  # fmt: skip
MODELS = ("Memory", "Hit", "History", "Proposal", "Conflict", "LoggedEvent", "VerifyReport",
          "Rectangle")  # fmt: skip
ERRORS = ("NotFound", "ValidationError", "SupersessionRefused", "ConcurrencyConflict",
          "IdempotencyMismatch", "StoreUnavailable")  # fmt: skip


def test_all_is_pinned_and_importable() -> None:
    assert set(erstwhile.__all__) == PUBLIC
    for name in erstwhile.__all__:
        assert hasattr(erstwhile, name)


def test_models_are_frozen_pydantic_models() -> None:
    for name in MODELS:
        model = getattr(erstwhile, name)
        assert issubclass(model, pydantic.BaseModel)
        assert model.model_config.get("frozen") is True


def test_every_error_has_one_root() -> None:
    for name in ERRORS:
        assert issubclass(getattr(erstwhile, name), erstwhile.ErstwhileError)


def test_every_error_survives_pickle_and_copy() -> None:
    """A worker of a process pool hands its error over pickled."""
    errors = [getattr(erstwhile, name)("said") for name in ERRORS if name != "SupersessionRefused"]
    errors.append(erstwhile.SupersessionRefused("event_kind", "an event cannot be superseded"))
    for error in errors:
        error.add_note("noted")
        for passed in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
            assert (type(passed), str(passed), passed.__notes__) == (
                type(error), str(error), ["noted"],
            )  # fmt: skip
            assert getattr(passed, "reason", None) == getattr(error, "reason", None)
