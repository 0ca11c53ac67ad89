"""The platform floor's infrastructure: Redis, HBase and database clients, timeouts, circuit
breakers, outage classification, metrics, logs, health probes and start-up
checks. Imports no app."""
