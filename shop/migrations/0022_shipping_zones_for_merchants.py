"""Merchants set a product's shipping zones in its admin page; On-call may look."""

from django.db import migrations

GRANTED = {
    "Merchants": ["view_shippingzone", "add_shippingzone", "change_shippingzone", "delete_shippingzone"],
    "On-call": ["view_shippingzone"],
}


def grant(apps, schema_editor):
    from django.contrib.auth.management import create_permissions

    # Permissions are normally made after all migrations; the grant needs these now.
    config = apps.get_app_config("shop")
    config.models_module = True
    create_permissions(config, verbosity=0)
    config.models_module = None
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in GRANTED.items():
        wanted = Permission.objects.filter(content_type__app_label="shop", codename__in=codenames)
        for group in apps.get_model("auth", "Group").objects.filter(name=name):
            group.permissions.add(*wanted)


def revoke(apps, schema_editor):
    Permission = apps.get_model("auth", "Permission")
    for name, codenames in GRANTED.items():
        groups = apps.get_model("auth", "Group").objects.filter(name=name)
        for permission in Permission.objects.filter(content_type__app_label="shop", codename__in=codenames):
            permission.group_set.remove(*groups)


class Migration(migrations.Migration):
    dependencies = [("shop", "0021_shipping_zones"), ("shop", "0003_roles")]

    operations = [migrations.RunPython(grant, revoke)]
