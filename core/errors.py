"""Domain errors: each has a stable code, an HTTP status and a message a person can act on.

A detail is written at the raise site as `gettext_lazy("...")` (with values: `fill(gettext_lazy(
"... %(name)s ..."), name=...)`): it is translated when the answer is written, in the language of
the request it answers, wherever the error was raised (a claim lane's worker thread has no request
language of its own). The `code` is the contract and stays as it is in every language.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from django.db import DatabaseError, InterfaceError, InternalError, OperationalError
from django.utils.functional import lazy

if TYPE_CHECKING:
    from django.utils.functional import _StrOrPromise

    Detail: TypeAlias = _StrOrPromise  # text, or gettext_lazy's promise of it
else:
    Detail = object


def _filled(message: Detail, values: dict[str, object]) -> str:
    return str(message) % values


_fill = lazy(_filled, str)


def fill(message: Detail, /, **values: object) -> Detail:
    """A detail with values in it, translated only when it is read (str()): in the answer's language."""
    return _fill(message, values)


class FloodgateError(Exception):
    code = "error"
    status = 400
    retry_after: int | None = None

    def __init__(self, detail: Detail, **extra: object) -> None:
        super().__init__(detail)
        self.detail = detail
        self.extra = extra


class NotFound(FloodgateError):
    code, status = "not_found", 404


class InvalidInput(FloodgateError):
    code, status = "invalid", 422


class TooLarge(FloodgateError):
    code, status = "too_large", 413


class InvalidIdempotencyKey(FloodgateError):
    code, status = "invalid_idempotency_key", 400


class IdempotencyKeyReused(FloodgateError):
    code, status = "idempotency_key_reused", 422


class InvalidQuantity(FloodgateError):
    code, status = "invalid_quantity", 422


class Unauthenticated(FloodgateError):
    code, status = "unauthenticated", 401


class CsrfFailed(FloodgateError):
    code, status = "csrf_failed", 403


class Forbidden(FloodgateError):
    code, status = "forbidden", 403


class SoldOut(FloodgateError):
    code, status = "sold_out", 409


class VariantSoldOut(SoldOut):
    """This variant has nothing left, others do (`left` names them): not the drop's "sold out"."""

    code = "variant_sold_out"


class InvalidVariant(FloodgateError):
    """No such variant in the drop, or none named where the drop has several (`variants` lists them)."""

    code, status = "invalid_variant", 422


class UnitTaken(FloodgateError):
    code, status = "unit_taken", 409


class HoldExists(FloodgateError):
    code, status = "hold_exists", 409


class Paused(FloodgateError):
    code, status = "paused", 423


class NotStarted(FloodgateError):
    code, status = "not_started", 425


class Ended(FloodgateError):
    code, status = "ended", 410


class NotAdmitted(FloodgateError):
    code, status = "not_admitted", 403


class InvalidPresaleCode(FloodgateError):
    """No such presale code for this drop (mistyped, another drop's, or not a code at all)."""

    code, status = "invalid_code", 403


class PresaleCodeUsed(FloodgateError):
    """The presale code exists but has been used as often as it may be."""

    code, status = "code_used", 409


class InvalidDiscountCode(FloodgateError):
    """No such discount code (mistyped, or not a code at all)."""

    code, status = "invalid_discount_code", 422


class DiscountCodeNotForDrop(FloodgateError):
    """The discount code is another drop's (or takes an amount off in another currency)."""

    code, status = "discount_code_not_for_drop", 422


class DiscountCodeUsed(FloodgateError):
    """The discount code has discounted as many holds as it may."""

    code, status = "discount_code_used", 409


class DiscountCodeNotYet(FloodgateError):
    code, status = "discount_code_not_started", 425


class DiscountCodeExpired(FloodgateError):
    code, status = "discount_code_expired", 410


class DiscountNotApplicable(FloodgateError):
    """The hold cannot take a code now: it has one, its payment started, or it ended."""

    code, status = "discount_not_applicable", 409


class LimitReached(FloodgateError):
    code, status = "limit_reached", 422


class MoreTimeUsed(FloodgateError):
    code, status = "more_time_used", 409


class HoldNotActive(FloodgateError):
    code, status = "hold_not_active", 409


class Busy(FloodgateError):
    code, status, retry_after = "busy", 503, 1


# SQLSTATE read_only_sql_transaction: a write reached a server that is read-only now, a primary
# Patroni demoted (it lost etcd's quorum, or was cut off) or a standby a router still sends to.
READ_ONLY = "25006"


def database_not_now(error: DatabaseError) -> bool:
    """The database cannot take this right now (a lost or refused connection, a lock or statement
    timeout, the pool's wait run out, a failover under way): "busy, try again", never a 500. Django
    raises a write refused by a read-only server as InternalError: it is "not now" too."""
    if isinstance(error, OperationalError | InterfaceError):
        return True
    return isinstance(error, InternalError) and getattr(error.__cause__, "sqlstate", None) == READ_ONLY


class ProofRequired(FloodgateError):
    code, status = "proof_of_work_required", 428


class RateLimited(FloodgateError):
    code, status = "rate_limited", 429

    def __init__(self, detail: Detail, *, retry_after: int, **extra: object) -> None:
        super().__init__(detail, **extra)
        self.retry_after = max(1, retry_after)
