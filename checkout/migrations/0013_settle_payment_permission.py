"""Marking a refused capture or void settled by hand gets its own permission (it clears the
payments-needing-attention alert); On-call, who settles them at the provider, may see payments and
record them, Merchants may not by default."""

from django.db import migrations

GRANTED = ["view_payment", "settle_payment"]


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the grant needs this one now.
    config = apps.get_app_config("checkout")
    config.models_module = True
    create_permissions(config, verbosity=0)
    config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    wanted = Permission.objects.filter(content_type__app_label="checkout", codename__in=GRANTED)
    for group in apps.get_model("auth", "Group").objects.filter(name="On-call"):
        group.permissions.add(*wanted)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    groups = apps.get_model("auth", "Group").objects.filter(name="On-call")
    for permission in Permission.objects.filter(content_type__app_label="checkout", codename__in=GRANTED):
        permission.group_set.remove(*groups)


class Migration(migrations.Migration):
    dependencies = [("checkout", "0012_order_shipment"), ("shop", "0003_roles")]

    operations = [
        migrations.AlterModelOptions(
            name="payment",
            options={
                "permissions": [("settle_payment", "Can mark a refused capture or void settled by hand")],
                "verbose_name": "payment",
                "verbose_name_plural": "payments",
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
