{
  "format_version": 2,
  "roots": [
    {
      "signatures": [
        {
          "key_id": "a8f6f4d2554d63cf",
          "signature": "qaC4ZRUeuEkJ0iNFXZ4hkxk0d2MYveyNG5U+cdj4JyhCiugx8OSQBkrcWZPdHUi1gF24vBGt4ULM6OJbNteNAw=="
        }
      ],
      "signed": {
        "app_id": "demo",
        "expires": "2027-11-27T16:18:15Z",
        "min_sequence": 0,
        "revoked": [],
        "root_keys": {
          "a8f6f4d2554d63cf": "C1m+qwH0HvGmnBTggYj0JHiez1+88Vgoo8M2tlRM32w="
        },
        "signing_keys": {},
        "threshold": 1,
        "type": "fpctl-trust-root",
        "version": 1
      }
    },
    {
      "signatures": [
        {
          "key_id": "a8f6f4d2554d63cf",
          "signature": "YYSZ9v1z43ddFMujSKPhvSsWO43F4OJk6laV/5EH7ZT6cWgS3yov51RUcnBkb3cI/FBfnsA1ByPGshL1dEOUBw=="
        }
      ],
      "signed": {
        "app_id": "demo",
        "expires": "2027-11-27T16:18:15Z",
        "min_sequence": 0,
        "revoked": [],
        "root_keys": {
          "a8f6f4d2554d63cf": "C1m+qwH0HvGmnBTggYj0JHiez1+88Vgoo8M2tlRM32w="
        },
        "signing_keys": {
          "408edea31218f16a": {
            "expires": "2027-02-25T16:18:15Z",
            "not_before": "2026-11-27T16:18:15Z",
            "public_key": "hQ6sjNIxyCqQZVlo53GurirbWTjBAjFDPqUQ7vVF2QA="
          }
        },
        "threshold": 1,
        "type": "fpctl-trust-root",
        "version": 2
      }
    }
  ],
  "signature": "hYi7kiFvwObSkL+Y4/361ZJi0wvp8pHdNVos5FW8YRT62Sf86Maw6KjRnLcnQHhgsxpAc/8Lqh3VTMXVdywpDg==",
  "signed": {
    "app_id": "demo",
    "expires": "2027-05-26T16:18:15Z",
    "key_id": "408edea31218f16a",
    "manifest_sha256": "9c239ae39e767da5a65eaac202845ecf03daeda0e6fe5c7b73131c0dd1d542d7",
    "sequence": 3,
    "signed_at": "2026-11-27T16:18:15Z",
    "type": "fpctl-bundle-signature"
  }
}
