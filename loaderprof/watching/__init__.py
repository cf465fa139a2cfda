"""The watch pipeline: run a user's command hooked and sampled, assemble what it did,
check it and build its WatchReport. Same file names as `comparing` for the same roles."""
