package config

// certPEM and keyPEM are a real client certificate and its key
// (testdata/client.crt and client.key, issued by the CA of pem), each
// base64 on one line so that a block stays three lines long: the parser
// checks that a <cert> holds a certificate, a <key> a private key, and
// that the two belong together.
const (
	certPEM = "-----BEGIN CERTIFICATE-----\nMIIBsTCCAVigAwIBAgIUc62MCBK7/l9hqaa4H7136hFFq2UwCgYIKoZIzj0EAwIwIzEhMB8GA1UEAwwYV2lyZWxhbmUgVGVzdCBGaXh0dXJlIENBMCAXDTI2MTIwMTIzMDc0MFoYDzIxMjYxMTA3MjMwNzQwWjAZMRcwFQYDVQQDDA5maXh0dXJlLWNsaWVudDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABJunn2NhU67TDxU6PV4OAgasgjkj53EZhtiztsTLK5pFI7JmCEY/cOoUz1vka0iEHgLo4xH+PGXJk+dnsghOw3KjcjBwMAkGA1UdEwQCMAAwDgYDVR0PAQH/BAQDAgeAMBMGA1UdJQQMMAoGCCsGAQUFBwMCMB0GA1UdDgQWBBSM3UakK+pREzB+lwB/ppoHLsIPMjAfBgNVHSMEGDAWgBS39S+MSv6frywTNEIk45kFp+xc1TAKBggqhkjOPQQDAgNHADBEAiBuGEY0miXf7hbjhb/hw8pCDWWHn62pJpqlt8A/gZjW8wIgQrzXfjqV6h5Nqo/nAa+TkolAc1bbn3k2f8eYzZgqGc0=\n-----END CERTIFICATE-----\n"
	keyPEM  = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQglLDEylCmWpChisDsWIVeY8HWfPbruH1tH6rfOX39wbqhRANCAASbp59jYVOu0w8VOj1eDgIGrII5I+dxGYbYs7bEyyuaRSOyZghGP3DqFM9b5GtIhB4C6OMR/jxlyZPnZ7IITsNy\n-----END PRIVATE KEY-----\n"
)
