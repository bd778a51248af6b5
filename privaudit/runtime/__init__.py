"""What a run needs from the machine it runs on, below everything else: devices and threads
(:mod:`.devices`), the cache directory and its lock (:mod:`.cache`), the content memo
(:mod:`.memo`), the machine's speed and the shipped cost reference (:mod:`.costs`), and what
is recorded about the software and hardware (:mod:`.provenance`)."""
