"""A quick password hasher for the tests (Django's advice for test speed).

Django 5.2's PBKDF2 runs 1,000,000 iterations: 0.57 s of CPU per hash measured here, paid by every
``admin_client`` (its superuser), every browser test's operator and login, ~100 s of a
``make test`` run. This one keeps the algorithm's name and format (``pbkdf2_sha256$<iterations>$
...``), so a server or worker the tests start with the product's own hashers still checks these
passwords: the iteration count is read from the stored hash.
"""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
