"""Host detection: probes (one source each) feeding frozen HostFacts."""
