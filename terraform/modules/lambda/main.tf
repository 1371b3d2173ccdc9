# Strata on AWS Lambda: an API function (writer and reader roles) behind an API Gateway
# HTTP API or a Function URL, and a compactor function run on a schedule. Both run the
# same binary (bootstrap), which answers the Lambda runtime API when started without
# arguments. One invocation serves one request and flushes the writer before it
# answers: producers batch on their side (linger).

# No secret sits in the functions' environment (readable by anyone allowed
# lambda:GetFunctionConfiguration, and shown in the console): STRATA_SECRETS names the
# Secrets Manager secrets the binary reads at start-up — the catalog password (the
# "password" key of the catalog module's secret) and the API keys.

locals {
  catalog_secret = "PGPASSWORD=${var.catalog_secret_arn}#password"
  api_secret     = var.api_key_count > 0 ? ",STRATA_API_KEYS=${aws_secretsmanager_secret.api_keys[0].arn}" : ""
  common_env = merge({
    STRATA_CATALOG    = var.catalog_url
    STRATA_BUCKET     = var.bucket_url
    STRATA_LOG_FORMAT = "json"
  }, var.extra_environment)
  streaming = var.frontend == "function_url" && var.function_url_streaming
}

resource "random_password" "api_key" {
  count   = var.api_key_count
  length  = 40
  special = false
}

resource "aws_secretsmanager_secret" "api_keys" {
  count       = var.api_key_count > 0 ? 1 : 0
  name_prefix = "${var.name}-api-keys-"
  description = "Strata API keys (${var.name}), comma-separated: send one as Authorization: Bearer KEY."
  tags        = var.tags
}

resource "aws_secretsmanager_secret_version" "api_keys" {
  count         = var.api_key_count > 0 ? 1 : 0
  secret_id     = aws_secretsmanager_secret.api_keys[0].id
  secret_string = join(",", random_password.api_key[*].result)
}

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
  }
}

resource "aws_iam_role" "api" {
  name_prefix        = "${var.name}-api-"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

resource "aws_iam_role" "compactor" {
  name_prefix        = "${var.name}-compactor-"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

# Each function reads only the secrets it is given.
data "aws_iam_policy_document" "api_secrets" {
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = concat([var.catalog_secret_arn], aws_secretsmanager_secret.api_keys[*].arn)
  }
}

data "aws_iam_policy_document" "compactor_secrets" {
  statement {
    actions   = ["secretsmanager:GetSecretValue"]
    resources = [var.catalog_secret_arn]
  }
}

resource "aws_iam_role_policy" "api_secrets" {
  role   = aws_iam_role.api.id
  policy = data.aws_iam_policy_document.api_secrets.json
}

resource "aws_iam_role_policy" "compactor_secrets" {
  role   = aws_iam_role.compactor.id
  policy = data.aws_iam_policy_document.compactor_secrets.json
}

resource "aws_iam_role_policy_attachment" "api_vpc" {
  role       = aws_iam_role.api.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
}

resource "aws_iam_role_policy_attachment" "api_node" {
  role       = aws_iam_role.api.name
  policy_arn = var.node_policy_arn
}

resource "aws_iam_role_policy_attachment" "compactor_vpc" {
  role       = aws_iam_role.compactor.name
  policy_arn = "arn:aws:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole"
}

resource "aws_iam_role_policy_attachment" "compactor" {
  role       = aws_iam_role.compactor.name
  policy_arn = var.compactor_policy_arn
}

resource "aws_cloudwatch_log_group" "api" {
  name              = "/aws/lambda/${var.name}-api"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_cloudwatch_log_group" "compactor" {
  name              = "/aws/lambda/${var.name}-compactor"
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

resource "aws_lambda_function" "api" {
  function_name                  = "${var.name}-api"
  role                           = aws_iam_role.api.arn
  runtime                        = "provided.al2023"
  handler                        = "bootstrap"
  architectures                  = [var.architecture]
  filename                       = var.package_file
  source_code_hash               = filebase64sha256(var.package_file)
  memory_size                    = var.memory_mb
  timeout                        = var.timeout_seconds
  reserved_concurrent_executions = var.reserved_concurrency
  tags                           = var.tags

  environment {
    variables = merge(local.common_env, {
      STRATA_ROLES     = "writer,reader"
      STRATA_SECRETS   = "${local.catalog_secret}${local.api_secret}"
      STRATA_STREAMING = tostring(local.streaming)
    })
  }

  vpc_config {
    subnet_ids         = var.subnet_ids
    security_group_ids = var.security_group_ids
  }

  depends_on = [aws_cloudwatch_log_group.api, aws_iam_role_policy_attachment.api_vpc, aws_iam_role_policy.api_secrets]
}

resource "aws_lambda_function" "compactor" {
  function_name = "${var.name}-compactor"
  role          = aws_iam_role.compactor.arn
  runtime       = "provided.al2023"
  handler       = "bootstrap"
  architectures = [var.architecture]
  filename      = var.package_file
  # Passes are leased, so overlapping runs are safe; one at a time is enough.
  reserved_concurrent_executions = 1
  source_code_hash               = filebase64sha256(var.package_file)
  memory_size                    = var.compactor_memory_mb
  timeout                        = var.compactor_timeout_seconds
  tags                           = var.tags

  environment {
    variables = merge(local.common_env, {
      STRATA_ROLES   = "compactor"
      STRATA_SECRETS = local.catalog_secret
    })
  }

  vpc_config {
    subnet_ids         = var.subnet_ids
    security_group_ids = var.security_group_ids
  }

  depends_on = [aws_cloudwatch_log_group.compactor, aws_iam_role_policy_attachment.compactor_vpc, aws_iam_role_policy.compactor_secrets]
}

# The compactor's schedule.
resource "aws_cloudwatch_event_rule" "compactor" {
  name                = "${var.name}-compactor"
  description         = "One Strata compaction pass per event."
  schedule_expression = var.compactor_schedule
  tags                = var.tags
}

resource "aws_cloudwatch_event_target" "compactor" {
  rule = aws_cloudwatch_event_rule.compactor.name
  arn  = aws_lambda_function.compactor.arn
}

resource "aws_lambda_permission" "compactor_schedule" {
  statement_id  = "AllowEventBridgeSchedule"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.compactor.function_name
  principal     = "events.amazonaws.com"
  source_arn    = aws_cloudwatch_event_rule.compactor.arn
}

# Front end: API Gateway HTTP API ...
resource "aws_apigatewayv2_api" "this" {
  count         = var.frontend == "http_api" ? 1 : 0
  name          = var.name
  protocol_type = "HTTP"
  tags          = var.tags
}

resource "aws_apigatewayv2_integration" "this" {
  count                  = var.frontend == "http_api" ? 1 : 0
  api_id                 = aws_apigatewayv2_api.this[0].id
  integration_type       = "AWS_PROXY"
  integration_uri        = aws_lambda_function.api.invoke_arn
  payload_format_version = "2.0"
  timeout_milliseconds   = 30000
}

resource "aws_apigatewayv2_route" "this" {
  count     = var.frontend == "http_api" ? 1 : 0
  api_id    = aws_apigatewayv2_api.this[0].id
  route_key = "$default"
  target    = "integrations/${aws_apigatewayv2_integration.this[0].id}"
}

resource "aws_apigatewayv2_stage" "this" {
  count       = var.frontend == "http_api" ? 1 : 0
  api_id      = aws_apigatewayv2_api.this[0].id
  name        = "$default"
  auto_deploy = true
  tags        = var.tags

  # Beyond these, API Gateway answers 429 before invoking (and paying for) a function.
  default_route_settings {
    throttling_rate_limit  = var.api_throttle_rate_limit
    throttling_burst_limit = var.api_throttle_burst_limit
  }
}

resource "aws_lambda_permission" "http_api" {
  count         = var.frontend == "http_api" ? 1 : 0
  statement_id  = "AllowHTTPAPI"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.api.function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.this[0].execution_arn}/*/*"
}

# ... or a Function URL.
resource "aws_lambda_function_url" "this" {
  count              = var.frontend == "function_url" ? 1 : 0
  function_name      = aws_lambda_function.api.function_name
  authorization_type = var.function_url_iam_auth ? "AWS_IAM" : "NONE"
  invoke_mode        = local.streaming ? "RESPONSE_STREAM" : "BUFFERED"
}

# Public URL: Strata's API keys do the authentication.
resource "aws_lambda_permission" "function_url" {
  count                  = var.frontend == "function_url" && !var.function_url_iam_auth ? 1 : 0
  statement_id           = "AllowPublicFunctionURL"
  action                 = "lambda:InvokeFunctionUrl"
  function_name          = aws_lambda_function.api.function_name
  principal              = "*"
  function_url_auth_type = "NONE"
}
