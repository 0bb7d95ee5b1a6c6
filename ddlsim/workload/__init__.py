"""The model zoo and the layers a model is made of: what is trained, and its time to train."""
