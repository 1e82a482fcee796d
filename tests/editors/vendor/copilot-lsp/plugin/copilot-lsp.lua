require("copilot-lsp.util").set_hl()
