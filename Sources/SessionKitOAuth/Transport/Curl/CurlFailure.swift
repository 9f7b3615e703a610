#if os(Linux)
    import CSessionKitCurl
    import Foundation

    /// libcurl's result codes read as the `URLError` codes FoundationNetworking reports for them, so that
    /// ``TransportFailureKind`` classifies both transports' failures the same way.
    enum CurlFailure {
        static func urlError(for code: CURLcode) -> URLError {
            URLError(self.code(for: code))
        }

        static func code(for code: CURLcode) -> URLError.Code {
            switch code {
            case CURLE_COULDNT_CONNECT: .cannotConnectToHost
            case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: .cannotFindHost
            case CURLE_OPERATION_TIMEDOUT: .timedOut
            case CURLE_URL_MALFORMAT: .badURL
            case CURLE_UNSUPPORTED_PROTOCOL: .unsupportedURL
            // "Empty reply from server": the connection closed before any byte of an answer.
            case CURLE_GOT_NOTHING: .badServerResponse
            case CURLE_WEIRD_SERVER_REPLY: .cannotParseResponse
            case CURLE_BAD_CONTENT_ENCODING: .cannotDecodeContentData
            case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM:
                .networkConnectionLost
            case CURLE_PEER_FAILED_VERIFICATION: .serverCertificateUntrusted
            case CURLE_SSL_CONNECT_ERROR, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE:
                .secureConnectionFailed
            case CURLE_FILESIZE_EXCEEDED: .dataLengthExceedsMaximum
            case CURLE_ABORTED_BY_CALLBACK: .cancelled
            default: .unknown
            }
        }
    }
#endif
