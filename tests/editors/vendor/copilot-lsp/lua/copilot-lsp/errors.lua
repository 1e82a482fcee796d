return {
    ErrNotStarted = "Copilot LSP not started",
}
