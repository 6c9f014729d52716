"""Failed orders keep a code, not an English sentence (checkout.failures): rewrite the old rows."""

import re

from django.db import migrations

SENTENCES = {
    "Your hold ended before the payment arrived, so the units were not yours any more. "
    "The payment was cancelled: you are not charged.": "too_late",
    "The payment did not match the price, so it was cancelled: you are not charged. "
    "The units went back on sale.": "amount_mismatch",
    "The time to pay ran out before a payment arrived; the units went back on sale.": "abandoned",
}
DECLINED = re.compile(r"^The payment was declined \((?P<why>[^)]*)\)\.$")
# checkout.failures' decline codes as they were on 2026-12-06 (a migration does not import app code)
DECLINES = {
    "card_declined", "generic_decline", "expired_card", "incorrect_cvc", "incorrect_number",
    "insufficient_funds", "processing_error", "authentication_required",
    "payment_intent_authentication_failure", "lost_card", "stolen_card",
}  # fmt: skip


def to_codes(apps, schema_editor):
    Order = apps.get_model("checkout", "Order")
    for sentence, code in SENTENCES.items():
        Order.objects.filter(failure_reason=sentence).update(failure_reason=code)
    for order in Order.objects.filter(failure_reason__startswith="The payment was declined (").only(
        "pk", "failure_reason"
    ):
        match = DECLINED.match(order.failure_reason)
        if match:
            why = match["why"].replace(" ", "_")
            code = f"declined:{why}" if why in DECLINES else "declined"
            Order.objects.filter(pk=order.pk).update(failure_reason=code)


class Migration(migrations.Migration):
    dependencies = [("checkout", "0010_dispute_roles")]

    operations = [migrations.RunPython(to_codes, migrations.RunPython.noop, elidable=True)]
