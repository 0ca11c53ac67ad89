"""The storage floor: inbox and group timelines, msgkeys, content and its partitions, delivery
events. Bulk-first interfaces under the apps; each backend passes one contract suite
(``tests/storage/``). Imports the platform floor (``infra``, ``api``) only, never an app."""
