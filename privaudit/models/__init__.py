"""The pre-trained models, offline: the backbone (:mod:`.backbone`), the spaCy pipelines
(:mod:`.pipelines`), the Hide-and-Seek entity protocol built on spaCy's NER
(:mod:`.entities`), and a generative model a user names (:mod:`.generative`: HaS's hide
model)."""
