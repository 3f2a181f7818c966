//! The signature checks of `jsonwebtoken` done by `ring` (which TLS to the issuer already
//! brings): verification only, of the asymmetric algorithms `oauth.rs` accepts. The server
//! never signs, and holds no private key.

use jsonwebtoken::crypto::{CryptoProvider, JwkUtils, JwtSigner, JwtVerifier};
use jsonwebtoken::errors::{new_error, ErrorKind, Result};
use jsonwebtoken::signature::{Error as SignatureError, Verifier};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, DecodingKeyKind, EncodingKey};
use ring::signature as rs;

/// A public key and the algorithm it checks.
enum Public {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
        params: &'static rs::RsaParameters,
    },
    Ec {
        point: Vec<u8>,
        params: &'static rs::EcdsaVerificationAlgorithm,
    },
}

struct RingVerifier {
    alg: Algorithm,
    key: Public,
}

impl Verifier<Vec<u8>> for RingVerifier {
    fn verify(
        &self,
        message: &[u8],
        signature: &Vec<u8>,
    ) -> std::result::Result<(), SignatureError> {
        let checked = match &self.key {
            Public::Rsa { n, e, params } => {
                rs::RsaPublicKeyComponents { n, e }.verify(params, message, signature)
            }
            Public::Ec { point, params } => {
                rs::UnparsedPublicKey::new(*params, point).verify(message, signature)
            }
        };
        checked.map_err(|_| SignatureError::new())
    }
}

impl JwtVerifier for RingVerifier {
    fn algorithm(&self) -> Algorithm {
        self.alg
    }
}

fn verifier(alg: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    let rsa = |params| match key.kind() {
        DecodingKeyKind::RsaModulusExponent { n, e } if key.family() == AlgorithmFamily::Rsa => {
            Ok(Public::Rsa {
                n: n.clone(),
                e: e.clone(),
                params,
            })
        }
        _ => Err(new_error(ErrorKind::InvalidAlgorithm)),
    };
    let ec = |params| match key.kind() {
        DecodingKeyKind::SecretOrDer(point) if key.family() == AlgorithmFamily::Ec => {
            Ok(Public::Ec {
                point: point.clone(),
                params,
            })
        }
        _ => Err(new_error(ErrorKind::InvalidAlgorithm)),
    };
    let public = match alg {
        Algorithm::RS256 => rsa(&rs::RSA_PKCS1_2048_8192_SHA256)?,
        Algorithm::RS384 => rsa(&rs::RSA_PKCS1_2048_8192_SHA384)?,
        Algorithm::RS512 => rsa(&rs::RSA_PKCS1_2048_8192_SHA512)?,
        Algorithm::PS256 => rsa(&rs::RSA_PSS_2048_8192_SHA256)?,
        Algorithm::PS384 => rsa(&rs::RSA_PSS_2048_8192_SHA384)?,
        Algorithm::PS512 => rsa(&rs::RSA_PSS_2048_8192_SHA512)?,
        Algorithm::ES256 => ec(&rs::ECDSA_P256_SHA256_FIXED)?,
        Algorithm::ES384 => ec(&rs::ECDSA_P384_SHA384_FIXED)?,
        _ => return Err(new_error(ErrorKind::InvalidAlgorithm)),
    };
    Ok(Box::new(RingVerifier {
        alg: *alg,
        key: public,
    }))
}

fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    Err(new_error(ErrorKind::InvalidAlgorithm))
}

static PROVIDER: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: verifier,
    jwk_utils: JwkUtils::new_unimplemented(),
};

/// Makes this the process's `jsonwebtoken` provider (once; later calls do nothing).
pub(crate) fn install() {
    let _ = PROVIDER.install_default();
}
