"""Stand-ins for services we cannot reach: scripted chat models (and, later, loopback servers)."""
