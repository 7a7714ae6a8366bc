package testpki

// Fixed credentials for configuration-parser tests, which need real PEM
// (the parsers decode and check every credential at load time) but no
// handshake: a CA certificate and a certificate with its key issued by it
// (ovpn/config/testdata: ca.crt, client.crt, client.key; CN "Wirelane Test
// Fixture CA" and "fixture-client", valid to 2126). Each is one base64
// line between its armour lines, so that an inline block of one is five
// lines long (<tag>, BEGIN, base64, END, </tag>).
const (
	FixtureCA   = "-----BEGIN CERTIFICATE-----\nMIIBnjCCAUOgAwIBAgIUL/02EWGaamHnQEOJMirmfGNIvfwwCgYIKoZIzj0EAwIwIzEhMB8GA1UEAwwYV2lyZWxhbmUgVGVzdCBGaXh0dXJlIENBMCAXDTI2MTIwMTIzMDczOVoYDzIxMjYxMTA3MjMwNzM5WjAjMSEwHwYDVQQDDBhXaXJlbGFuZSBUZXN0IEZpeHR1cmUgQ0EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAATlc2SBPOZT636xk/l9p85wsnBi3JgU98bViXH2VPjYv8eU/Prk1c036TfoB0ymypv+Vi4ZVp/D8TmHLb6tXrfdo1MwUTAdBgNVHQ4EFgQUt/UvjEr+n68sEzRCJOOZBafsXNUwHwYDVR0jBBgwFoAUt/UvjEr+n68sEzRCJOOZBafsXNUwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEA3Uk9SGfbx3WOK5paONKR/6J6wCOEMQhra5DTdfRrIxgCIQC7X8eGwuqt2PZ0gDNjThF1Moub28uqVScgJzLp7PE7kQ==\n-----END CERTIFICATE-----\n"
	FixtureCert = "-----BEGIN CERTIFICATE-----\nMIIBsTCCAVigAwIBAgIUc62MCBK7/l9hqaa4H7136hFFq2UwCgYIKoZIzj0EAwIwIzEhMB8GA1UEAwwYV2lyZWxhbmUgVGVzdCBGaXh0dXJlIENBMCAXDTI2MTIwMTIzMDc0MFoYDzIxMjYxMTA3MjMwNzQwWjAZMRcwFQYDVQQDDA5maXh0dXJlLWNsaWVudDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABJunn2NhU67TDxU6PV4OAgasgjkj53EZhtiztsTLK5pFI7JmCEY/cOoUz1vka0iEHgLo4xH+PGXJk+dnsghOw3KjcjBwMAkGA1UdEwQCMAAwDgYDVR0PAQH/BAQDAgeAMBMGA1UdJQQMMAoGCCsGAQUFBwMCMB0GA1UdDgQWBBSM3UakK+pREzB+lwB/ppoHLsIPMjAfBgNVHSMEGDAWgBS39S+MSv6frywTNEIk45kFp+xc1TAKBggqhkjOPQQDAgNHADBEAiBuGEY0miXf7hbjhb/hw8pCDWWHn62pJpqlt8A/gZjW8wIgQrzXfjqV6h5Nqo/nAa+TkolAc1bbn3k2f8eYzZgqGc0=\n-----END CERTIFICATE-----\n"
	FixtureKey  = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQglLDEylCmWpChisDsWIVeY8HWfPbruH1tH6rfOX39wbqhRANCAASbp59jYVOu0w8VOj1eDgIGrII5I+dxGYbYs7bEyyuaRSOyZghGP3DqFM9b5GtIhB4C6OMR/jxlyZPnZ7IITsNy\n-----END PRIVATE KEY-----\n"
	// FixtureInline is <ca>, <cert> and <key> blocks of the above (15
	// lines).
	FixtureInline = "<ca>\n" + FixtureCA + "</ca>\n<cert>\n" + FixtureCert + "</cert>\n<key>\n" + FixtureKey + "</key>\n"
)
