"""The one error type a user sees: printed as a single line, exit status 2."""


class UserError(Exception):
    """Bad input: names the key, the bad value and what is allowed. Nothing was trained."""
