"""Orders paid with a discount code before the order kept it: the code and what it took off, from the
hold's code (the same arithmetic as shop.pricing.discount), so their pages, e-mails sent again and
invoices issued from now on say it. Their invoices already issued stay as they were."""

from decimal import ROUND_HALF_UP, Decimal

from django.db import migrations


def _off(shown, percent, amount_minor):
    if percent is not None:
        taken = int((Decimal(shown) * percent / Decimal(100)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    else:
        taken = amount_minor or 0
    return max(0, min(taken, shown - 1))


def keep(apps, schema_editor):
    Order = apps.get_model("checkout", "Order")
    orders = Order.objects.filter(hold__discount_code__isnull=False, discount_code="").select_related(
        "hold__discount_code", "hold__variant", "drop__product"
    )
    for order in orders.iterator(chunk_size=500):
        code, variant = order.hold.discount_code, order.hold.variant
        unit = variant.price_minor if variant is not None and variant.price_minor is not None else None
        shown = (unit if unit is not None else order.drop.product.price_minor) * order.quantity
        Order.objects.filter(pk=order.pk).update(
            discount_code=code.code, discount_minor=_off(shown, code.percent, code.amount_minor)
        )


def forget(apps, schema_editor):
    apps.get_model("checkout", "Order").objects.update(discount_code="", discount_minor=0)


class Migration(migrations.Migration):
    dependencies = [
        ("checkout", "0016_order_and_invoice_shipping_fee_and_discount"),
        ("holds", "0009_discount_codes_for_merchants"),
    ]

    operations = [migrations.RunPython(keep, forget)]
