"""The pre-trained models, offline: the backbone (:mod:`.backbone`), the spaCy pipelines
(:mod:`.pipelines`), and the Hide-and-Seek entity protocol built on spaCy's NER
(:mod:`.entities`)."""
