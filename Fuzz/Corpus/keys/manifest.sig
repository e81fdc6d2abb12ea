{
  "alg": "ed25519",
  "key_id": "1ff2d6a159a09a03",
  "signature": "+KrOfA4gDlQpN9RzF/w2Sf7oEeKdw7n/MlSKDD2Em5ZZ0hiNZVD1T3PeR4B2IaMxatqmnaL+tUhi2LmrNiC+BQ=="
}
