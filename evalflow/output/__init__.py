"""What a run leaves behind: results.json, samples, manifest.json, and the printed table."""
