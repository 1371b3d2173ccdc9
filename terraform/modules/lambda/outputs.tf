output "url" {
  description = "Base URL of the Strata API."
  value       = var.frontend == "http_api" ? aws_apigatewayv2_stage.this[0].invoke_url : aws_lambda_function_url.this[0].function_url
}

output "api_keys_secret_arn" {
  description = "ARN of the secret holding the API keys (aws secretsmanager get-secret-value --secret-id ARN); null when keys are off."
  value       = var.api_key_count > 0 ? aws_secretsmanager_secret.api_keys[0].arn : null
}

output "api_function_name" {
  description = "Name of the API function."
  value       = aws_lambda_function.api.function_name
}

output "compactor_function_name" {
  description = "Name of the compactor function."
  value       = aws_lambda_function.compactor.function_name
}
