"""The pooled backend's connection (see the package docstring)."""

from __future__ import annotations

import contextlib

from django.db.backends.postgresql import base


class DatabaseWrapper(base.DatabaseWrapper):
    """Django's PostgreSQL connection, whose transactions each begin with its settings.

    Statements Django runs in autocommit (outside ``atomic``) are transactions of their own
    and get none of them: what must hold for a statement has to run inside ``atomic``.
    """

    #: Tells :mod:`jobs.durable.sessions` that session state does not hold here.
    transaction_pooled = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._transaction_settings: dict[str, str] | None = None

    @property
    def transaction_settings(self) -> dict[str, str]:
        """name -> value, ``set_config``'d (transaction-local) at the start of every
        transaction: the process's defaults, plus what its user adds (a worker's bounds)."""
        if self._transaction_settings is None:
            # Not at __init__: Django builds this connection while the models still load.
            from jobs.durable.sessions import transaction_defaults

            self._transaction_settings = transaction_defaults()
        return self._transaction_settings

    def _set_autocommit(self, autocommit: bool) -> None:
        super()._set_autocommit(autocommit)
        if autocommit or not self.transaction_settings:
            return
        # Autocommit off: psycopg sends BEGIN before this statement, so the settings are the
        # transaction's first statement, one round trip, on the server connection that holds it.
        names = list(self.transaction_settings)
        sql = "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in names)
        params = [part for name in names for part in (name, self.transaction_settings[name])]
        try:
            with self.wrap_database_errors, self.connection.cursor() as cursor:
                cursor.execute(sql, params)
        except Exception:
            # Leave the connection as Django believes it is (autocommit), or closed by it.
            with contextlib.suppress(Exception):
                self.connection.rollback()
                self.connection.autocommit = True
            raise
