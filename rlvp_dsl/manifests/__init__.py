"""Tool catalogues and the rules derived from them.

* `formats` -- manifest files (ours, tau2, MCP ``tools/list``, OpenAI tool schemas, BFCL function docs) -> `Manifest`;
* `records` -- `ManifestError` and the field checks every format shares;
* `signals` -- the signals a manifest declares (progress levels, violation and done flags);
* `bfcl_tags` -- the BFCL tag table;
* `targets` -- target inference from the identifiers tools share;
* `derive` -- a manifest -> derived rules (``rlvp-compile --auto-from-tags``).
"""

from ..tools import ToolSpec
from .formats import (
    OURS,
    Manifest,
    detect_manifest_format,
    load_manifest,
    parse_manifest,
)
from .records import ManifestError, ManifestNotFound
from .signals import SignalSpec
from .targets import infer_targets, is_identifier_param

__all__ = [
    "OURS",
    "Manifest",
    "ManifestError",
    "ManifestNotFound",
    "SignalSpec",
    "ToolSpec",
    "detect_manifest_format",
    "infer_targets",
    "is_identifier_param",
    "load_manifest",
    "parse_manifest",
]
