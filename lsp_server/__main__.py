"""`python -m lsp_server`: the same as `dllm-infill-ls`."""

import sys

from .cli import main

sys.exit(main())
