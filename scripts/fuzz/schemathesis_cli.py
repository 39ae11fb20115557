"""schemathesis's command line, as its own `schemathesis` script starts it, with one upstream bug worked
around: while it looks for links in a 2xx JSON body, schemathesis 4.32.5 (engine/observations.py,
`_same_origin_path`) parses every string that starts with http:// or https:// with `urlsplit`, and a
string the fuzzer generated and the API stored and echoed back, such as "http://[", raises
`ValueError: Invalid IPv6 URL` out of the engine: the run ends with an internal error that says nothing
about the API (CI, stop 33). Such a string is not a link, so it is treated as one that is not."""

import sys

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
