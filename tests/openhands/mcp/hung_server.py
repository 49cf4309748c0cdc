"""An MCP server for tests that never answers: it starts, reads nothing, writes nothing.

`python hung_server.py` hangs until it is killed; `python hung_server.py PATH` ends (without
a word: the client sees the connection close) once PATH exists, so a test decides exactly
when the hang is over."""

import os
import sys
import time

release = sys.argv[1] if len(sys.argv) > 1 else None
print("hung server started", file=sys.stderr, flush=True)
while not (release and os.path.exists(release)):
    time.sleep(0.05)
