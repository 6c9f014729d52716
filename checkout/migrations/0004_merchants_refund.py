"""Merchants may refund orders (the permission 0003 made); on-call may not, by default."""

from django.db import migrations


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the grant needs this one now.
    config = apps.get_app_config("checkout")
    config.models_module = True
    create_permissions(config, verbosity=0)
    config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    refund = Permission.objects.get(content_type__app_label="checkout", codename="refund_order")
    for group in apps.get_model("auth", "Group").objects.filter(name="Merchants"):
        group.permissions.add(refund)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for refund in Permission.objects.filter(content_type__app_label="checkout", codename="refund_order"):
        refund.group_set.clear()


class Migration(migrations.Migration):
    dependencies = [("checkout", "0003_refunds"), ("shop", "0003_roles")]

    operations = [migrations.RunPython(grant, revoke)]
