package server

import (
	"bytes"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
)

// OAuthKey is a public key that may have signed bearer tokens.
type OAuthKey struct {
	// ID is the key ID, as in a JSON Web Key's "kid". A token naming a
	// kid is checked against the keys with that ID and those without one.
	ID string
	// Key is an *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey.
	Key crypto.PublicKey
}

// ParseOAuthKeys reads the public keys that sign bearer tokens from PEM
// or from a JSON Web Key Set.
//
// PEM input may hold any number of "PUBLIC KEY" (PKIX), "RSA PUBLIC KEY"
// (PKCS #1) and "CERTIFICATE" blocks; their keys have no ID. JSON input is
// a JWK Set ({"keys":[…]}, the document Entra ID publishes at its jwks_uri)
// or a single JWK; RSA, EC (P-256, P-384, P-521) and Ed25519 keys are read
// from their parameters or, failing those, from their first x5c
// certificate, and keep their kid. Keys marked for encryption ("use":
// "enc") are skipped. Private keys are refused: the server only verifies.
func ParseOAuthKeys(data []byte) ([]OAuthKey, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return parseJWKS(trimmed)
	}
	return parsePEMKeys(data)
}

func parsePEMKeys(data []byte) ([]OAuthKey, error) {
	var keys []OAuthKey
	for n := 1; ; n++ {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		var (
			key crypto.PublicKey
			err error
		)
		switch block.Type {
		case "PUBLIC KEY":
			key, err = x509.ParsePKIXPublicKey(block.Bytes)
		case "RSA PUBLIC KEY":
			key, err = x509.ParsePKCS1PublicKey(block.Bytes)
		case "CERTIFICATE":
			var cert *x509.Certificate
			if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
				key = cert.PublicKey
			}
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			return nil, fmt.Errorf("PEM block %d is a private key; give the public key (or certificate) that verifies the tokens", n)
		default:
			return nil, fmt.Errorf("PEM block %d: unsupported type %q; want PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE", n, block.Type)
		}
		if err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %w", n, block.Type, err)
		}
		if err := checkVerificationKey(key); err != nil {
			return nil, fmt.Errorf("PEM block %d (%s): %w", n, block.Type, err)
		}
		keys = append(keys, OAuthKey{Key: key})
	}
	if len(keys) == 0 {
		return nil, errors.New("no keys found: want PEM public keys or certificates, or a JSON Web Key Set")
	}
	return keys, nil
}

// checkVerificationKey accepts the key types the token signature
// algorithms use, with RSA keys of at least 2048 bits as Entra ID issues.
func checkVerificationKey(k crypto.PublicKey) error {
	switch k := k.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("RSA key of %d bits; want at least 2048", k.N.BitLen())
		}
		return nil
	case *ecdsa.PublicKey, ed25519.PublicKey:
		return nil
	}
	return fmt.Errorf("unsupported key type %T; want RSA, ECDSA or Ed25519", k)
}

// jwk holds the JSON Web Key members this server reads (RFC 7517, 7518,
// 8037).
type jwk struct {
	Kty string   `json:"kty"`
	Kid string   `json:"kid"`
	Use string   `json:"use"`
	N   string   `json:"n"`
	E   string   `json:"e"`
	Crv string   `json:"crv"`
	X   string   `json:"x"`
	Y   string   `json:"y"`
	D   string   `json:"d"`
	X5c []string `json:"x5c"`
}

func parseJWKS(data []byte) ([]OAuthKey, error) {
	var doc struct {
		Keys *[]jwk `json:"keys"`
		jwk
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("JSON Web Key Set: %w", err)
	}
	set := []jwk{doc.jwk}
	if doc.Keys != nil {
		set = *doc.Keys
	}
	var keys []OAuthKey
	for i, k := range set {
		if k.Use == "enc" {
			continue
		}
		key, err := k.publicKey()
		if err != nil {
			return nil, fmt.Errorf("JSON Web Key %d (kid %q): %w", i+1, truncate(k.Kid, 64), err)
		}
		if err := checkVerificationKey(key); err != nil {
			return nil, fmt.Errorf("JSON Web Key %d (kid %q): %w", i+1, truncate(k.Kid, 64), err)
		}
		keys = append(keys, OAuthKey{ID: k.Kid, Key: key})
	}
	if len(keys) == 0 {
		return nil, errors.New("the JSON Web Key Set has no signature keys")
	}
	return keys, nil
}

func (k *jwk) publicKey() (crypto.PublicKey, error) {
	if k.D != "" {
		return nil, errors.New("a private key; give the public key set")
	}
	switch k.Kty {
	case "RSA":
		if k.N != "" || k.E != "" {
			return rsaFromJWK(k.N, k.E)
		}
	case "EC":
		if k.X != "" || k.Y != "" {
			return ecdsaFromJWK(k.Crv, k.X, k.Y)
		}
	case "OKP":
		if k.Crv != "Ed25519" {
			return nil, fmt.Errorf("OKP curve %q; want Ed25519", k.Crv)
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, errors.New("x is not a base64url Ed25519 public key")
		}
		return ed25519.PublicKey(x), nil
	default:
		return nil, fmt.Errorf("unsupported key type (kty) %q; want RSA, EC or OKP", k.Kty)
	}
	if len(k.X5c) == 0 {
		return nil, fmt.Errorf("%s key without parameters or x5c certificate", k.Kty)
	}
	// x5c holds standard base64 DER certificates, the key's first.
	der, err := base64.StdEncoding.DecodeString(k.X5c[0])
	if err != nil {
		return nil, fmt.Errorf("x5c: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("x5c: %w", err)
	}
	return cert.PublicKey, nil
}

func rsaFromJWK(n64, e64 string) (*rsa.PublicKey, error) {
	n, err := base64.RawURLEncoding.DecodeString(n64)
	if err != nil || len(n) == 0 {
		return nil, errors.New("n is not a base64url integer")
	}
	e, err := base64.RawURLEncoding.DecodeString(e64)
	if err != nil || len(e) == 0 || len(e) > 4 {
		return nil, errors.New("e is not a base64url integer of at most 32 bits")
	}
	var exp int
	for _, b := range e {
		exp = exp<<8 | int(b)
	}
	if exp < 3 || exp%2 == 0 {
		return nil, fmt.Errorf("exponent %d is not an odd number of at least 3", exp)
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}, nil
}

// ecdsaFromJWK builds an ECDSA key, letting crypto/ecdh check that the
// point lies on the curve.
func ecdsaFromJWK(crv, x64, y64 string) (*ecdsa.PublicKey, error) {
	var (
		curve elliptic.Curve
		ec    ecdh.Curve
	)
	switch crv {
	case "P-256":
		curve, ec = elliptic.P256(), ecdh.P256()
	case "P-384":
		curve, ec = elliptic.P384(), ecdh.P384()
	case "P-521":
		curve, ec = elliptic.P521(), ecdh.P521()
	default:
		return nil, fmt.Errorf("EC curve %q; want P-256, P-384 or P-521", crv)
	}
	size := (curve.Params().BitSize + 7) / 8
	x, errX := base64.RawURLEncoding.DecodeString(x64)
	y, errY := base64.RawURLEncoding.DecodeString(y64)
	if errX != nil || errY != nil || len(x) != size || len(y) != size {
		return nil, fmt.Errorf("x and y are not base64url coordinates of %d bytes", size)
	}
	point := append(append([]byte{4}, x...), y...)
	if _, err := ec.NewPublicKey(point); err != nil {
		return nil, errors.New("the point is not on the curve")
	}
	return &ecdsa.PublicKey{Curve: curve, X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}, nil
}
