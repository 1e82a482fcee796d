"""Replicas of the engine service on Ray Serve (docs/deploy.md): each replica one engine with its
own scheduler behind the HTTP front, Serve routing, restarting and health-checking them.

`spec` is plain data and imports nothing heavy; `replica`, `app` and `run` need Ray, installed
with the `ray` extra (`pip install -e '.[ray]'` in this checkout)."""
