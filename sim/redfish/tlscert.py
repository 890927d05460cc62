"""The simulator's certificates: a throwaway CA made at start and one leaf for every BMC address.

ECDSA P-256 keeps the handshakes of hundreds of BMCs cheap (an RSA-2048 signature costs the server
about 20 times a P-256 one; real iDRACs ship either, and the client handles both). The CA's
certificate is written next to the leaf so a site can point `bmc_tls.ca_bundle` at it and keep
verification on.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "bringup simulated lab"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common)])


KEY_TYPES = ("ecdsa", "rsa")


def _new_key(key_type: str) -> ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey:
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=2048)
    if key_type == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    raise ValueError(f"unknown key type {key_type!r} (known: {', '.join(KEY_TYPES)})")


def make_certificates(directory: Path, addresses: list[str], key_type: str = "ecdsa") -> tuple[Path, Path, Path]:
    """Write ca.pem, bmc.pem and bmc.key (0600) into `directory`, with ECDSA P-256 or RSA-2048 keys;
    returns their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    ca_key = _new_key(key_type)
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("bringup sim BMC CA"))
        .issuer_name(_name("bringup sim BMC CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = _new_key(key_type)
    sans: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(a)) for a in sorted(set(addresses))]
    sans.append(x509.DNSName("localhost"))
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("idrac-sim"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = directory / "ca.pem", directory / "bmc.pem", directory / "bmc.key"
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    # The leaf alone, as servers send chains without their root: a client either has the CA already
    # (ca_bundle) or does not verify, and parsing a second certificate in every handshake buys nothing.
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                   serialization.NoEncryption()))
    return ca_path, cert_path, key_path
