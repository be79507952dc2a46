"""What the Hub tests share besides the fixtures: the token the local Hub accepts."""

#: Distinctive, so a leak cannot hide in other text.
TOKEN = "hf_fintts" + "Test" * 6 + "Q9"
