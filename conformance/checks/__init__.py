"""The checks, by area.  Importing this package registers them in `model.REGISTRY`, in the
order the runner runs them: checks on the live agent first, then the checks that judge the
whole run (schema, framing, capabilities), then exit on stdin EOF last."""

from . import (  # noqa: F401 - imported for registration, in run order
    cancel,
    capabilities,
    editor,
    extensibility,
    initialize,
    jsonrpc,
    lifecycle,
    modes,
    permissions,
    prompt,
    sessions,
    transport,
    v2,
    v2_cancel,
    whole_run,
)
