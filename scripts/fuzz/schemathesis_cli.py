"""schemathesis's command line, as its own `schemathesis` script starts it, with two upstream bugs worked
around, each of which ended a CI run with an internal error that says nothing about the API:

- While it looks for links in a 2xx JSON body, schemathesis 4.32.5 (engine/observations.py,
  `_same_origin_path`) parses every string that starts with http:// or https:// with `urlsplit`, and a
  string the fuzzer generated and the API stored and echoed back, such as "http://[", raises
  `ValueError: Invalid IPv6 URL` out of the engine (stop 33). Such a string is not a link, so it is
  treated as one that is not.
- With `workers = 2` two threads describe Hypothesis strategies at once, and each parses source with
  `ast.parse` (hypothesis/internal/lambda_sources.py). CPython 3.11 (this machine has 3.11.7) counts the
  AST constructor's recursion depth in state the threads share, so two parses that overlap can fail with
  `SystemError: AST constructor recursion depth mismatch` (two CI runs of 2026-12-03). The parses take
  turns.
"""

import ast
import sys
import threading

_parse = ast.parse
_parsing = threading.Lock()


def parse_in_turn(*args, **kwargs):
    with _parsing:
        return _parse(*args, **kwargs)


ast.parse = parse_in_turn

from schemathesis.engine import observations

same_origin_path = getattr(observations, "_same_origin_path", None)
if same_origin_path is not None:

    def same_origin_path_or_none(value, origin):
        try:
            return same_origin_path(value, origin)
        except ValueError:
            return None

    observations._same_origin_path = same_origin_path_or_none

from schemathesis.cli import schemathesis  # noqa: E402

sys.exit(schemathesis())
