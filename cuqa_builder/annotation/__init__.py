"""The Label Studio round trip: candidates out as review tasks, reviewed items back in."""
