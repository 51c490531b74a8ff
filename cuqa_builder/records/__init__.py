"""Typed records that flow between the pipeline stages (SPEC 2.2, 2.4), one module per family:
`base` (what every record is), `pages`, `events`, `items` (the released `cuqa.jsonl`),
`candidates` (generate and validate) and `pool` (the connected recipe's pools). Import a record
from its module."""
