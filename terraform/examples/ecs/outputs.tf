output "url" {
  description = "Base URL of the Strata API."
  value       = module.ecs.url
}

output "api_keys_secret_arn" {
  description = "Secret holding the API key: aws secretsmanager get-secret-value --secret-id ARN."
  value       = module.ecs.api_keys_secret_arn
}

output "catalog_secret_arn" {
  description = "Secret holding the catalog's credentials."
  value       = module.catalog.secret_arn
}

output "kafka_bootstrap" {
  description = "bootstrap.servers for Kafka clients (null unless kafka = true)."
  value       = module.ecs.kafka_bootstrap
}

output "kafka_dns_name" {
  description = "DNS name of the Kafka Network Load Balancer, to point kafka_host's alias record at."
  value       = module.ecs.kafka_dns_name
}
