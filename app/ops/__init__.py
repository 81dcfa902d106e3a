"""Operations: metrics, traces to an OTLP collector, and the recent calls and requests the status page shows."""
