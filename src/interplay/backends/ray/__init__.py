"""Work on Ray: the cluster a run connects to (and members mapped over it), and env runners
that step env copies in Ray actors, offered to the training loop as one runner. Ray itself
is imported only when one of these is used."""
