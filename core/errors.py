"""The one exception type user input raises; interfaces print it as one line and exit 2."""


class SpecError(ValueError):
    """Bad user input: a spec file, a name, a value. The message says what to do."""
