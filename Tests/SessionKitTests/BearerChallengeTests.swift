import Testing

@testable import SessionKit
@testable import SessionKitOAuth

@Suite(.timeLimit(.minutes(TimeLimit.ordinary))) struct BearerChallengeTests {
    @Test func readsRFC6750Examples() throws {
        let plain = try #require(BearerChallenge.parse(#"Bearer realm="example""#))
        #expect(plain.realm == "example")
        #expect(plain.error == nil)

        let expired = try #require(
            BearerChallenge.parse(
                #"Bearer realm="example", error="invalid_token", error_description="The access token expired""#))
        #expect(expired.error == "invalid_token")
        #expect(expired.errorDescription == "The access token expired")
        #expect(expired.parameters.count == 3)
    }

    @Test func readsScopeAndResourceMetadata() throws {
        let challenge = try #require(
            BearerChallenge.parse(
                #"Bearer error="insufficient_scope", scope="read write", "#
                    + #"resource_metadata="https://rs.example/.well-known/oauth-protected-resource""#))
        #expect(challenge.error == "insufficient_scope")
        #expect(challenge.scope == "read write")
        #expect(challenge.resourceMetadata == "https://rs.example/.well-known/oauth-protected-resource")
    }

    @Test func findsBearerAmongOtherChallengesIncludingRFC9110sExample() throws {
        let header =
            #"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple", "#
            + #"Bearer realm="api", error=invalid_token"#
        let challenge = try #require(BearerChallenge.parse(header))
        #expect(challenge.parameters == ["realm": "api", "error": "invalid_token"])

        let challenges = AuthenticationChallengeParser.challenges(in: header)
        #expect(challenges.map(\.scheme) == ["Newauth", "Basic", "Bearer"])
        #expect(challenges[0].parameters == ["realm": "apps", "type": "1", "title": #"Login to "apps""#])
    }

    @Test func readsAToken68ChallengeBeforeBearer() throws {
        let header = "Negotiate a87421000492aa874209af8bc028==, Basic dXNlcjpwYXNz, Bearer error=\"invalid_token\""
        let challenges = AuthenticationChallengeParser.challenges(in: header)
        #expect(challenges.map(\.scheme) == ["Negotiate", "Basic", "Bearer"])
        #expect(challenges[0].token68 == "a87421000492aa874209af8bc028==")
        #expect(challenges[1].token68 == "dXNlcjpwYXNz")
        #expect(BearerChallenge.parse(header)?.error == "invalid_token")
    }

    @Test func unescapesQuotedPairs() throws {
        let challenge = try #require(BearerChallenge.parse(#"Bearer error_description="a \"quoted\" \\ back\slash""#))
        #expect(challenge.errorDescription == #"a "quoted" \ backslash"#)
    }

    @Test func matchesSchemeAndParameterNamesInAnyCase() throws {
        let challenge = try #require(BearerChallenge.parse(#"bEARER ERROR="invalid_token", Realm=x"#))
        #expect(challenge.error == "invalid_token")
        #expect(challenge.realm == "x")
    }

    @Test func toleratesWhitespaceAroundEqualsAndEmptyListElements() throws {
        let challenge = try #require(BearerChallenge.parse(" , Bearer  realm = \"a\" ,, error\t=\tinvalid_token , "))
        #expect(challenge.parameters == ["realm": "a", "error": "invalid_token"])
    }

    @Test func keepsTheFirstOfARepeatedParameter() throws {
        let challenge = try #require(
            BearerChallenge.parse(#"Bearer error="invalid_token", error="insufficient_scope""#))
        #expect(challenge.error == "invalid_token")
    }

    @Test func forgivesAMissingCommaBetweenParameters() throws {
        let challenge = try #require(BearerChallenge.parse(#"Bearer realm="a" error="invalid_token""#))
        #expect(challenge.parameters == ["realm": "a", "error": "invalid_token"])
    }

    @Test func readsTheFirstOfSeveralBearerChallenges() throws {
        let challenge = try #require(BearerChallenge.parse(#"Bearer realm="one", Bearer realm="two""#))
        #expect(challenge.realm == "one")
    }

    @Test func readsABareBearerChallenge() throws {
        #expect(BearerChallenge.parse("Bearer") == BearerChallenge(parameters: [:]))
        #expect(BearerChallenge.parse("Basic realm=x, Bearer") == BearerChallenge(parameters: [:]))
    }

    @Test(arguments: [
        "", "   ", ",,,", "Basic realm=\"x\"", "Bearerish realm=x", "Digest realm=\"bearer\"", "\"Bearer\"",
    ])
    func answersNilWithoutABearerChallenge(header: String) {
        #expect(BearerChallenge.parse(header) == nil)
    }

    @Test func skipsElementsItCannotReadAndKeepsTheRest() throws {
        // An unterminated quoted string swallows the rest of the value; what came before it stays.
        let unterminated = try #require(BearerChallenge.parse(#"Bearer realm="a", error="invalid_token"#))
        #expect(unterminated.parameters == ["realm": "a"])
        // A control character is not allowed in a quoted string: that parameter is dropped.
        let control = try #require(BearerChallenge.parse("Bearer error=\"bad\u{1}\", realm=ok"))
        #expect(control.parameters == ["realm": "ok"])
        // Junk between parameters is skipped up to the next comma.
        let junk = try #require(BearerChallenge.parse(#"Bearer realm=a, =x, "q", ===, error=invalid_token"#))
        #expect(junk.parameters == ["realm": "a", "error": "invalid_token"])
    }

    @Test func ignoresHeadersOver16KiB() {
        let padding = String(repeating: "a", count: OAuthLimits.maximumHeaderBytes)
        #expect(BearerChallenge.parse("Bearer error=invalid_token, x=\"\(padding)\"") == nil)
        let fits = String(repeating: "a", count: OAuthLimits.maximumHeaderBytes - 100)
        #expect(BearerChallenge.parse("Bearer error=invalid_token, x=\"\(fits)\"")?.error == "invalid_token")
    }

    @Test func lowercasesNamesGivenToTheInitializer() {
        let challenge = BearerChallenge(parameters: ["Error": "invalid_token", "SCOPE": "a"])
        #expect(challenge.error == "invalid_token")
        #expect(challenge.scope == "a")
    }
}
