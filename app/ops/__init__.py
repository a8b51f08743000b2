"""What an operator needs: health and readiness, metrics, structured logs, backups."""
