"""Networks and the pieces around them: layers, distributions, normalisation."""
