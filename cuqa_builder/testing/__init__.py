"""Loopback stand-ins for the real parts (MediaWiki's api.php, an OpenAI-compatible server, a
Label Studio server), shared by the tests and the benchmarks under `scripts/`.

They listen on 127.0.0.1 only and speak the real protocols, so the real clients (`requests`,
`openai`, `label-studio-sdk`) are exercised unpatched. Nothing in the pipeline imports them.
"""
