"""Ensure a demo user exists and print its credentials (used by ``./acurio start``)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create the demo user (and a staff operator) if missing and print the credentials."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="demo-acurio")

    def handle(self, *args, username: str, password: str, **options) -> None:
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_password(password)
            user.save(update_fields=["password"])
        admin, admin_created = User.objects.get_or_create(
            username="operator", defaults={"is_staff": True, "is_superuser": True}
        )
        if admin_created:
            admin.set_password("operator-acurio")
            admin.save(update_fields=["password"])
        note = "" if created else " (existing; password unchanged if you changed it)"
        self.stdout.write(f"acurio: demo user: {username} / {password}{note}")
        self.stdout.write("acurio: operator (admin): operator / operator-acurio")
